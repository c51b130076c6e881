#!/bin/sh -e
# count.sh STEPS: prints "step N" lines with a spin between them, then DONE (no child processes).
n=$1; i=1; sum=0
while [ "$i" -le "$n" ]; do
    j=0
    while [ "$j" -lt 3000 ]; do j=$((j + 1)); sum=$(((sum * 31 + j) % 1000003)); done
    echo "step $i"
    i=$((i + 1))
done
echo "DONE $sum"
