from partctl.cli import main

raise SystemExit(main())
