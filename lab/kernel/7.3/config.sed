# lab.config's options under Linux 7.3's names (scripts/lab-kernel.sh runs
# lab.config through this before merging and checking it).
# x86 has PREEMPT_LAZY since 6.13 and voluntary preemption is no longer
# offered beside it; Debian's 7.3 runs lazy preemption too.
s/^CONFIG_PREEMPT_VOLUNTARY=y$/CONFIG_PREEMPT_LAZY=y/
# /proc/sys is CONFIG_SYSCTL's now (fs/proc/Kconfig); PROC_SYSCTL is gone.
s/^CONFIG_PROC_SYSCTL=y$/CONFIG_SYSCTL=y/
