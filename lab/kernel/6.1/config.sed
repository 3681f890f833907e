# lab.config's options under Linux 6.1's names (scripts/lab-kernel.sh runs
# lab.config through this before merging and checking it).
# SLUB_TINY came in 6.2 (e240e53ae0ab): 6.1 has no such option to turn off.
/^# CONFIG_SLUB_TINY is not set$/d
