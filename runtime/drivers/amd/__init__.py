"""AMD driver: KFD ioctls, PM4 and SDMA command building, programs, and `AMDDevice`."""
