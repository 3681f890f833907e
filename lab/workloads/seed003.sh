#!/bin/sh
# Seed 003 in the lab (issue 10 item 6; ../shared/seeds/003: fio's max
# latency with C6 on and off, and the block layer's PM QoS patch): fio
# 4 KiB random reads, psync, on CPU 1, from lab.sh's null NVMe disk (a
# queue per CPU: the completion comes to the issuing CPU); fio's parent on
# CPU 2, as in experiment.sh. Each run writes
# fio's own report to /out/fio-N.json and each read's completion latency
# to /out/fio-N_clat.1.log, N counting the runs (idletrace experiment
# records before, then after). Runs in the lab VM's /work.
n=1
while [ -e /out/fio-$n.json ]; do n=$((n + 1)); done
exec taskset -c 2 fio --name=seed003 --filename=/dev/lab-null --size=32M --rw=randread --bs=4k --direct=1 \
	--ioengine=psync --time_based --runtime=4 --cpus_allowed=1 --output-format=json --output=/out/fio-$n.json \
	--write_lat_log=/out/fio-$n --log_avg_msec=0
