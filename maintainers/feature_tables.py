"""docs/model.md's observation tables, written from the declared features.

The rows of ``powertrip_env.dynamics.features`` are the one description of the observation; the
page shows them as two tables in its ``observation-features`` block, which ``powertrip docs``
writes and ``powertrip docs --check`` holds to the rows, as it does every generated page
(``doc_blocks`` finds the block wherever it lives). The docstring's narrower table stays in the
package, since ``help(PowerTripEnv)`` is built at import time.
"""

from __future__ import annotations

from powertrip_env.dynamics.features import (
    CARBON_JOB_ROWS,
    CARBON_SITE_ROWS,
    GLOBAL_ROWS,
    N_CARBON_JOB,
    N_CARBON_SITE,
    N_GLOBAL,
    N_SITE_FEATURES,
    N_TELEMETRY,
    SITE_ROWS,
    TELEMETRY_ROWS,
    TIME_SCALE_NOTE,
    bound_text,
    column_spans,
)

BLOCK = "observation-features"
"""The name of docs/model.md's generated block (``doc_blocks``)."""


def feature_tables() -> str:
    """The per-site and global tables: column numbers, feature, formula and range."""
    lines = []
    for title, rows in (
        (f"Per site ({N_SITE_FEATURES} features, in `dynamics.SITE_FEATURES` order):", SITE_ROWS),
        (
            f"Per site on a carbon task (`carbon_obs=True`, the carbon tasks from -v1;"
            f" {N_CARBON_SITE} more, after each site's features, in"
            " `dynamics.CARBON_SITE_FEATURES` order):",
            CARBON_SITE_ROWS,
        ),
        (
            f"Per site on the measured track ({N_TELEMETRY} more, after each site's features and"
            " a carbon task's columns, in `dynamics.TELEMETRY_FEATURES` order):",
            TELEMETRY_ROWS,
        ),
        (f"Global ({N_GLOBAL} features, in `dynamics.GLOBAL_FEATURES` order):", GLOBAL_ROWS),
        (
            f"Global on a carbon task ({N_CARBON_JOB} more, after the global features, in"
            " `dynamics.CARBON_JOB_FEATURES` order):",
            CARBON_JOB_ROWS,
        ),
    ):
        lines += ["", title, "", "| # | feature | formula | range |", "|---|---|---|---|"]
        for span, row in zip(column_spans(rows, "–"), rows, strict=True):
            bounds = f"[{bound_text(row.low)}, {bound_text(row.high)}]".replace("-", "−")
            lines.append(f"| {span} | {row.label} | {row.formula} | {bounds} |")
    lines += ["", TIME_SCALE_NOTE]
    return "\n".join(lines) + "\n"
