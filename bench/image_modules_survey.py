"""How many tasks of bench/.cache/pytest_corpus.jsonl.gz (issue 19) need a
module the sandbox image lacks: the lean image, and the scientific one.

    .venv/bin/python bench/image_modules_survey.py [--corpus FILE] [--image python] [--image scientific]

A task needs what its pytest module imports as the code reward reads it
(`rewardbox.rewards.needed_modules`: unguarded, absolute, beyond the standard
library, the solution and the harness); an image holds what its manifest says
(`rewardbox.images.image_manifest`: its labels, no container). Each image
given (a variant name or a reference) must be on the engine. A reference
solution that imports a missing module itself (its tests do not) is counted
apart: that one stays the model's `import_error`.
"""

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pytest_corpus_survey import CORPUS, load  # noqa: E402

from rewardbox.images import image_manifest, resolve_image  # noqa: E402
from rewardbox.rewards.labels import LabelError, parse_label  # noqa: E402
from rewardbox.rewards.needed_modules import imported_modules, needed_modules  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--image", action="append", help="a variant name or an image reference (repeatable; "
                                                         "default: python and scientific)")
    args = parser.parse_args()
    rows = load(args.corpus)
    needs: dict[str, tuple[str, ...]] = {}
    unusable = 0
    for row in rows:
        try:
            needs[row["id"]] = needed_modules(parse_label({"pytest": row["pytest"]}))
        except LabelError:
            unusable += 1
    solution_imports = {row["id"]: imported_modules(row.get("solution") or "") - set(sys.stdlib_module_names)
                        for row in rows}
    print(f"{len(rows)} tasks ({unusable} with a label that cannot be read); "
          f"{sum(1 for n in needs.values() if n)} whose tests import beyond the standard library (pytest among them)")
    for name in args.image or ["python", "scientific"]:
        image = resolve_image(name)
        manifest = image_manifest(image)
        if manifest is None or manifest.modules is None:
            print(f"{name}: {image} is {'not on the engine' if manifest is None else 'not ours (no manifest)'}")
            return 1
        held = set(manifest.modules)
        missing = {i: set(n) - held for i, n in needs.items() if set(n) - held}
        by_module = Counter(m for ms in missing.values() for m in ms)
        own = sum(1 for i, m in solution_imports.items() if (m - held - {"solution"}) and i not in missing)
        print(f"{name} ({image}): {len(missing)} of {len(needs)} tasks unscorable "
              f"({', '.join(f'{m} {n}' for m, n in by_module.most_common())}); "
              f"{own} more whose reference solution alone imports a missing module")
    return 0


if __name__ == "__main__":
    sys.exit(main())
