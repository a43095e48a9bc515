import sys

from tito.main import main

sys.exit(main())
