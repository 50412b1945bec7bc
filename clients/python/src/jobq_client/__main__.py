import sys

from jobq_client.cli import main

sys.exit(main())
