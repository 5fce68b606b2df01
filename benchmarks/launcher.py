"""A small process that starts every measured command, so that peak RSS is the command's own.

Why: Linux keeps a process's peak RSS across fork + exec. A child's `ru_maxrss` starts at the high-water
mark of the address space it was forked from (exec records the old one), so every command spawned by a
harness that generated a 1.6 GB channel reads 1.6 GB, the bare baseline included. This launcher never
holds more than the bare interpreter (`python -I -S`, only `os`/`sys`/`time`, ~8 MB): a command it starts
reads max(its own peak, the launcher's), and the launcher's is below any Python program's
(a bare `python -c pass` reads its own ~10 MB; run.py shows that row).

Protocol on stdin/stdout (binary, no json import: that alone is ~1.5 MB):
    request:  8-digit length, then NUL-separated fields:
              cwd, stdout path, stderr path, stdin path ("" = /dev/null), argv..., "\x01", KEY=VALUE...
    reply:    one line "wall_s maxrss_kb exit_code cpu_s" (cpu: user + system, the command and its waited children)
`wall_s` is spawn to reap (fork, exec, wait4); `maxrss_kb` is wait4's ru_maxrss, which on Linux covers
the command and the children it waited for (uv under envlock): the largest single process of the tree.
"""

import os
import sys
import time


def _serve() -> None:
    read, write = sys.stdin.buffer.read, sys.stdout.buffer.write
    while True:
        head = read(8)
        if len(head) < 8:
            return
        fields = read(int(head)).decode("utf-8", "surrogateescape").split("\0")
        cwd, out, err, inp = fields[:4]
        rest = fields[4:]
        cut = rest.index("\x01")
        argv = rest[:cut]
        env = dict(kv.split("=", 1) for kv in rest[cut + 1 :])
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: redirect, then become the command
            try:
                fd_in = os.open(inp or os.devnull, os.O_RDONLY)
                fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd_in, 0)
                os.dup2(fd_out, 1)
                os.dup2(fd_err, 2)
                if cwd:
                    os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            except BaseException as exc:  # noqa: BLE001 - the harness reads this from the stderr file
                os.write(2, f"launcher: cannot run {argv[:1]}: {exc}\n".encode())
            os._exit(127)
        _, status, usage = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        cpu = usage.ru_utime + usage.ru_stime
        write(f"{wall:.6f} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {cpu:.6f}\n".encode())
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    _serve()
