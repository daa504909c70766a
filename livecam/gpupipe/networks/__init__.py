"""MediaPipe's face detector and face mesh as batched torch modules (CPU or CUDA, fp32/fp16).

Weights are read from the ``.tflite`` files shipped in mediapipe 0.10.21 (mediapipe itself is
never imported). Public API::

    from livecam.gpupipe.networks.models import load_blazeface, load_face_mesh
    from livecam.gpupipe.networks.facemesh import rois_from_detections, rois_from_landmarks

    det = load_blazeface("short").to("cuda", torch.float16)   # or "full"
    mesh = load_face_mesh().to("cuda", torch.float16)
    found = det(frames_bhwc_bgr_u8)                  # FaceDetections, (B, max_faces, ...) slots
    rois = rois_from_detections(found.boxes_xyxy_px.flatten(0, 1),
                                found.keypoints_xy_px.flatten(0, 1))
    result = mesh(frames_bhwc_bgr_u8, frame_index_per_face, rois)   # (F, 468, 3) px

Every shape is static, so a whole detect + mesh call can be captured in a CUDA graph.
"""
