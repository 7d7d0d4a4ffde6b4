set terminal png size 900,540
set output '/work/main/bench/results/20261121-s3-full/threads.png'
set xlabel 'processes (mdtest-easy)'
set ylabel 'ops/s (log scale)'
set logscale y
set key outside right
set grid
set xtics 1
plot '/work/main/bench/results/20261121-s3-full/threads.0.dat' using 1:2 with linespoints title 'moosefs file create', '/work/main/bench/results/20261121-s3-full/threads.1.dat' using 1:2 with linespoints title 'moosefs file remove', '/work/main/bench/results/20261121-s3-full/threads.2.dat' using 1:2 with linespoints title 'passthrough file create', '/work/main/bench/results/20261121-s3-full/threads.3.dat' using 1:2 with linespoints title 'passthrough file remove', '/work/main/bench/results/20261121-s3-full/threads.4.dat' using 1:2 with linespoints title 'pomfs file create', '/work/main/bench/results/20261121-s3-full/threads.5.dat' using 1:2 with linespoints title 'pomfs file remove', '/work/main/bench/results/20261121-s3-full/threads.6.dat' using 1:2 with linespoints title 'tmpfs file create', '/work/main/bench/results/20261121-s3-full/threads.7.dat' using 1:2 with linespoints title 'tmpfs file remove'
