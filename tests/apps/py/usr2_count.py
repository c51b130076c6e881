"""usr2_count.py [STEPS=100000] [MS=20]: prints `step N` once per step and, each time its SIGUSR2
handler has run since, `usr2 K` with the number of runs so far. SIGUSR2 is crac's checkpoint
signal's number: another crac process's program sends it to this program's handler."""

import signal
import sys
import time

runs = 0


def on_usr2(_sig: int, _frame: object) -> None:
    global runs
    runs += 1


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    pause = (int(sys.argv[2]) if len(sys.argv) > 2 else 20) / 1000
    signal.signal(signal.SIGUSR2, on_usr2)
    told = 0
    for k in range(1, steps + 1):
        if runs != told:
            told = runs
            print(f"usr2 {told}", flush=True)
        print(f"step {k}", flush=True)
        time.sleep(pause)


if __name__ == "__main__":
    main()
