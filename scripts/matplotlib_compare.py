#!/usr/bin/python3
"""Draws an exported matrix-spectrum figure's numbers again with matplotlib, as a researcher would at
the same width (its defaults, constrained layout), for docs/figures.md's side-by-side comparison.

Usage:
  scripts/matplotlib_compare.py FIG.png.json OUT.png
FIG.png.json is the manifest `attnscope export --layout matrix-spectrum` writes beside its figure;
the matrices (.npy) and spectra (.csv) it names are read from beside it. Needs python3-matplotlib
(Debian), which nothing else in attnscope uses.
"""

import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    manifest_path, out = sys.argv[1], sys.argv[2]
    with open(manifest_path) as f:
        manifest = json.load(f)
    if manifest.get("layout") != "matrix-spectrum":
        sys.exit(f"{manifest_path} is not a matrix-spectrum figure's manifest")
    folder = os.path.dirname(os.path.abspath(manifest_path))
    width_pt, height_pt = manifest["size_pt"]
    rows = len(manifest["row_labels"])
    scale = manifest["scales"][0]
    fig, axes = plt.subplots(rows, 2, figsize=(width_pt / 72, height_pt / 72), constrained_layout=True,
                             squeeze=False)
    fig.suptitle(manifest["title"].replace("  \u00b7  ", " \u00b7 "))
    image = None
    for r in range(rows):
        matrix_panel, spectrum_panel = manifest["panels"][2 * r], manifest["panels"][2 * r + 1]
        matrix = np.load(os.path.join(folder, matrix_panel["data"]))
        image = axes[r][0].imshow(matrix, cmap="RdBu_r", vmin=scale["vmin"], vmax=scale["vmax"],
                                  interpolation="nearest")
        axes[r][0].set_xlabel("key token")
        axes[r][0].set_ylabel(manifest["row_labels"][r] + "\nquery token")
        with open(os.path.join(folder, spectrum_panel["data"])) as f:
            values = [float(row["singular_value"]) for row in csv.DictReader(f)]
        axes[r][1].semilogy(range(1, len(values) + 1), values)
        axes[r][1].set_title(spectrum_panel["title"])
        axes[r][1].set_xlabel("index")
        axes[r][1].set_ylabel("singular value")
    fig.colorbar(image, ax=axes[:, 0].tolist() + axes[:, 1].tolist(), label=scale["label"])
    fig.savefig(out, dpi=300)


if __name__ == "__main__":
    main()
