# SPDX-License-Identifier: Apache-2.0
"""Writes the files of the out-of-tree app that docs/writing-apps.md shows (each code block
right after a `<!-- file: NAME -->` line) into a folder, so that the install test builds the
page's own example: python3 doc_app.py DOC OUT_DIR"""
import os
import re
import sys

doc, out = sys.argv[1], sys.argv[2]
text = open(doc).read()
files = re.findall(r"<!-- file: ([\w./-]+) -->\n```\w*\n(.*?)\n```", text, re.S)
if {name for name, _ in files} != {"CMakeLists.txt", "scale.cpp"}:
    sys.exit(f"{doc}: expected the files CMakeLists.txt and scale.cpp, found "
             f"{[name for name, _ in files]}")
os.makedirs(out, exist_ok=True)
for name, body in files:
    with open(os.path.join(out, name), "w") as f:
        f.write(body + "\n")
print(f"{len(files)} files of {doc} in {out}")
