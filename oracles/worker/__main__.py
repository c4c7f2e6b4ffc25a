"""``python -m stagecheck.oracles.worker RECV_FD SEND_FD POSITION_FD MEMORY_MIB SYS_PATH``:
how ``process.WorkerProcess`` starts a worker process (``child.worker_main``)."""

import json
import sys

from stagecheck.oracles.worker.child import worker_main

if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                json.loads(sys.argv[5]))
