"""run_threads: the start / join / re-raise pattern of the thread tests."""
from __future__ import annotations

import threading


def run_threads(work, args_list):
    """Run work(*args) for each args of args_list, each on its own thread, all at once;
    wait for all, then raise the first exception any of them raised (in list order)."""
    errors = [None] * len(args_list)

    def run(k, args):
        try:
            work(*args)
        except BaseException as e:          # noqa: BLE001 - re-raised below
            errors[k] = e

    threads = [threading.Thread(target=run, args=(k, a)) for k, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
