"""`python -m crac_py` is the `crac` command."""

from crac_py._entry import main

if __name__ == "__main__":
    main()
