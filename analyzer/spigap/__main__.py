from spigap.cli import main

raise SystemExit(main())
