"""Count this process's open descriptors that point into one directory.

A count over all of /proc/self/fd is at the mercy of the cycle collector: an
earlier test's unreachable Log may be collected, closing its descriptors, in the
middle of the count (CI saw 95 for 100 once). Descriptors into a test's own
tmp_path are only ever opened and closed by that test.
"""
import os


def fds_under(path) -> int:
    prefix = os.path.realpath(path) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own fd among them)
            continue
        count += target.startswith(prefix)
    return count
