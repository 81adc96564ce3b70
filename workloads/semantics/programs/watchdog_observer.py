"""Watches a tree with Python's watchdog, as its users do, and prints each change as a JSON line.

Run by fsbench's `watchdog` backend (watchdog.ts): `python3 watchdog_observer.py ROOT`. It
starts watchdog's Observer (inotify on Linux, with watches added for new directories)
recursively on ROOT, prints {"ready": true} once Observer.start() has returned (the watches are
in place then), then one line per event watchdog's handler is given: created, modified,
deleted, and moved with both paths (watchdog pairs inotify's halves by their cookie). Closed
and opened events are not changes and are left out. It exits on SIGTERM.
"""
import json
import signal
import sys
import threading


def say(line):
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


try:
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers import Observer
except ImportError as err:
    say({"failure": "no-watchdog", "detail": str(err)})
    sys.exit(3)

CHANGES = {"created", "modified", "deleted", "moved"}


class Printer(FileSystemEventHandler):
    def on_any_event(self, event):
        if event.event_type not in CHANGES:
            return
        line = {"event": event.event_type, "dir": bool(event.is_directory), "path": event.src_path}
        if event.event_type == "moved":
            line["dest"] = event.dest_path
        say(line)


def main():
    root = sys.argv[1]
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    observer = Observer()
    try:
        observer.schedule(Printer(), root, recursive=True)
        observer.start()
    except OSError as err:
        say({"failure": "cannot-watch", "detail": str(err)})
        sys.exit(4)
    say({"ready": True})
    done.wait()
    observer.stop()
    observer.join(5)


main()
