"""``python -m testbed.simnode --personality vllm|sglang --port P …``"""

import sys

from testbed.simnode.node import main

sys.exit(main())
