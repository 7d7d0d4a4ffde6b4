set terminal png size 900,540
set output './threads.png'
set xlabel 'processes (mdtest-easy)'
set ylabel 'ops/s (log scale)'
set logscale y
set key outside right
set grid
set xtics 1
plot './threads.0.dat' using 1:2 with linespoints title 'moosefs file create', './threads.1.dat' using 1:2 with linespoints title 'moosefs file remove', './threads.2.dat' using 1:2 with linespoints title 'passthrough file create', './threads.3.dat' using 1:2 with linespoints title 'passthrough file remove', './threads.4.dat' using 1:2 with linespoints title 'pomfs file create', './threads.5.dat' using 1:2 with linespoints title 'pomfs file remove', './threads.6.dat' using 1:2 with linespoints title 'tmpfs file create', './threads.7.dat' using 1:2 with linespoints title 'tmpfs file remove'
