"""Writing a directory of vectors, shared by build_vectors.py and
partial/build_partial_vectors.py: one `<name>.json` per vector, and no
`.json` left from a vector no longer built."""

import json
import os


def write_vectors(here, vectors):
    """Writes each vector's doc() to here/<name>.json and removes the other .json files there."""
    keep = set()
    for v in vectors:
        fn = v.name + ".json"
        keep.add(fn)
        with open(os.path.join(here, fn), "w") as f:
            json.dump(v.doc(), f, indent=1, ensure_ascii=False)
            f.write("\n")
    for fn in os.listdir(here):
        if fn.endswith(".json") and fn not in keep:
            os.remove(os.path.join(here, fn))
    print("wrote %d vectors" % len(vectors))
