#!/usr/bin/env python3
"""evict.py FILE...: drops the files' pages from the page cache
(POSIX_FADV_DONTNEED; pages mapped by a running process stay)."""
import os
import sys

for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
