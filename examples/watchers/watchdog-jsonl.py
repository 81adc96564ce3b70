#!/usr/bin/python3
"""A watcher of your own, as fsbench's `backend: user` runs it: watches ROOT recursively and
prints each change as one JSON line, {"path": ..., "kind": ..., "from": ..., "time": ...}, the
format docs/semantics.md describes (kinds: created, modified, deleted, renamed, attrib, unknown).

This one is Python's watchdog (python3-watchdog); yours prints the same lines from whatever it
is. List it in the host's watcher list (FSBENCH_WATCHERS):

    {"watchers": [{"name": "my-watchdog",
                   "argv": ["/usr/bin/python3", "/etc/fsbench/watchdog-jsonl.py", "{root}"]}]}

and name it in a cell: `backend: user`, `watcher: my-watchdog`. It runs as nobody unless the
entry gives a uid and gid; flush each line, fsbench times the event when the line arrives.
"""
import json
import signal
import sys
import time

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

KINDS = {"created": "created", "modified": "modified", "deleted": "deleted", "moved": "renamed"}


class Printer(FileSystemEventHandler):
    def on_any_event(self, event):
        kind = KINDS.get(event.event_type)
        if kind is None:
            return
        line = {"path": event.src_path, "kind": kind, "time": time.time()}
        if kind == "renamed":
            line = {"path": event.dest_path, "kind": kind, "from": event.src_path, "time": line["time"]}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def main():
    observer = Observer()
    observer.schedule(Printer(), sys.argv[1], recursive=True)
    observer.start()
    signal.signal(signal.SIGTERM, lambda *_: observer.stop())
    observer.join()


if __name__ == "__main__":
    main()
