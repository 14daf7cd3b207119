"""The record/replay HTTP proxy (`pyrula proxy`): not yet supported in this build."""
