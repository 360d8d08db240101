"""Runs one command in a real pseudo-terminal of a given window size and reports what happened, as JSON.

Argument: a JSON object {argv, cwd, env, cols, rows, action, after_text, after_ms, limit_s, limit_bytes}.
action: "none", "SIGTERM", "SIGHUP", "SIGINT" (sent to the child by its pid), or "close" (the terminal is
closed, as when an ssh session drops). The action happens once after_text has appeared in the terminal's
output (or at once when after_text is empty), then after_ms more milliseconds. The child is killed by its pid
when it outlives limit_s seconds or writes more than limit_bytes bytes.
"""
import fcntl, json, os, pty, select, signal, struct, sys, termios, time

spec = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    os.chdir(spec["cwd"])
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])

fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", spec["rows"], spec["cols"], 0, 0))
start = time.monotonic()
total = 0
tail = b""
seen_at = None if spec.get("after_text") else start
acted = spec["action"] == "none"
closed = False
killed_for = None
status = None

while status is None:
    now = time.monotonic()
    if seen_at is None and spec["after_text"].encode() in tail:
        seen_at = now
    if not acted and seen_at is not None and now - seen_at >= spec.get("after_ms", 0) / 1000:
        acted = True
        if spec["action"] == "close":
            os.close(fd)
            closed = True
        else:
            os.kill(pid, getattr(signal, spec["action"]))
    if now - start > spec["limit_s"] or total > spec["limit_bytes"]:
        killed_for = "time" if now - start > spec["limit_s"] else "bytes"
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        break
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
    if closed:
        time.sleep(0.05)
        continue
    ready, _, _ = select.select([fd], [], [], 0.05)
    if ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        total += len(data)
        tail = (tail + data)[-20000:]

# what the child wrote before it ended
if not closed:
    while True:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        total += len(data)
        tail = (tail + data)[-20000:]
    os.close(fd)

print(json.dumps({
    "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
    "seconds": round(time.monotonic() - start, 3),
    "bytes": total,
    "killed_for": killed_for,
    "tail": tail.decode("utf-8", "replace"),
}))
