// Anchors the precompiled header target.
