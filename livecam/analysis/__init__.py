"""Face analysis: detection, face mesh landmarks, tracking, smoothing and face selection.

Entry points: :func:`livecam.analysis.photo.analyze_photo` for still photos and
:func:`build_stages` for the live pipeline. Importing this package loads no model.
"""

from __future__ import annotations
