set terminal png size 900,540
set output '/work/main/bench/results/20261121-scale-10m/dirscale.png'
set xlabel 'entries in the directory'
set ylabel 'ops/s (log scale)'
set logscale y
set key outside right
set grid
set logscale x
plot '/work/main/bench/results/20261121-scale-10m/dirscale.0.dat' using 1:2 with linespoints title 'passthrough', '/work/main/bench/results/20261121-scale-10m/dirscale.1.dat' using 1:2 with linespoints title 'pomfs', '/work/main/bench/results/20261121-scale-10m/dirscale.2.dat' using 1:2 with linespoints title 'tmpfs'
