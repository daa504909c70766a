"""The end of a subreaper script (Python run with ``-c`` that made itself
``PR_SET_CHILD_SUBREAPER`` and set ``code`` to its livecam child's exit code): the helpers that
child left behind (orphans adopted by the script: the process that unmaps a livecam process's
memory after it exits), each with its RSS and open files and waited for, printed as one JSON
line ``{"code": ..., "helpers": [...]}``. The script must import ``json`` and ``os``."""

REPORT_HELPERS = """
helpers = []
for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        status = open(f"/proc/{pid}/status").read()
        fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        continue
    if f"\\nPPid:\\t{os.getpid()}\\n" in status:
        helpers.append({"rss_mb": int(status.split("VmRSS:")[1].split()[0]) / 1024,
                        "files": sorted(set(fds))})
        os.waitpid(pid, 0)  # it ends by itself
print(json.dumps({"code": code, "helpers": helpers}))
"""
