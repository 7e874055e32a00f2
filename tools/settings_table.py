"""Print docs/settings.md's table of every setting, from the one registry (moses_recaser.cli.options.OPTIONS) and
the two command lines' parsers (which subcommands take each flag).

python tools/settings_table.py
"""

from moses_recaser.cli import ems, main
from moses_recaser.cli.options import markdown_table

if __name__ == "__main__":
    print(markdown_table(main.build_parser(), ems.build_parser()), end="")
