"""The example dict plugin (examples/plugins/dict_plugin.py), made to crash part-way through writes.

    python crashing_dict_plugin.py --crash-after N --marker PATH [--for-good] --file items.json

It keeps its items in `--file` like the example, so they outlive a crash. A process exits with
code 3 on its (N+1)-th `memory/put`, before storing it, when `PATH` does not exist yet, and
creates `PATH`: the crash happens once, and the process started after it works. With
`--for-good` every put after that first crash exits with code 3 too: a store that stays dead.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "plugins"))
import dict_plugin  # found through the line above

parser = argparse.ArgumentParser()
parser.add_argument("--crash-after", type=int, required=True)
parser.add_argument("--marker", type=Path, required=True)
parser.add_argument("--for-good", action="store_true")
options, rest = parser.parse_known_args()
sys.argv = [sys.argv[0], *rest]  # the example plugin reads --file


class CrashingStore(dict_plugin.Store):
    puts = 0

    def put(self, *args, **kwargs):
        crashed = options.marker.exists()
        if (not crashed and self.puts == options.crash_after) or (crashed and options.for_good):
            options.marker.touch()
            print("crashing-dict-plugin: the disk went away", file=sys.stderr, flush=True)
            sys.exit(3)
        self.puts += 1
        return super().put(*args, **kwargs)


dict_plugin.Store = CrashingStore
dict_plugin.main()
