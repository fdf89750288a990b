import sys

try:
    from .cli import main
except ImportError as missing:   # an installed lab whose Python packages are not installed
    sys.exit(f"locus: the lab needs the Python package {missing.name!r}: on Debian "
             "`apt install python3-rich python3-numpy python3-matplotlib` "
             "(the .deb recommends them), else `pip install -r lab/requirements.txt`")

sys.exit(main())
