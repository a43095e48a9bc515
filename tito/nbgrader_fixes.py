"""Preprocessors the course's nbgrader_config.py puts in place of nbgrader's own where those fail."""

from __future__ import annotations

from typing import Any

from nbgrader.preprocessors import DeduplicateIds


class DropDuplicateIds(DeduplicateIds):
    """A cell a student duplicated (JupyterLab copies its nbgrader metadata) keeps its code but no longer
    counts as an nbgrader cell. nbgrader's own DeduplicateIds leaves an empty metadata dict, which its
    metadata check then rejects as "an old version of the nbgrader metadata format", failing the whole
    submission (nbgrader 0.9)."""

    def preprocess_cell(self, cell: Any, resources: dict, cell_index: int) -> tuple[Any, dict]:
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.metadata.get("nbgrader") == {}:
            del cell.metadata["nbgrader"]
        return cell, resources
