set terminal png size 900,540
set output './dirscale.png'
set xlabel 'entries in the directory'
set ylabel 'ops/s (log scale)'
set logscale y
set key outside right
set grid
set logscale x
plot './dirscale.0.dat' using 1:2 with linespoints title 'passthrough', './dirscale.1.dat' using 1:2 with linespoints title 'pomfs', './dirscale.2.dat' using 1:2 with linespoints title 'tmpfs'
