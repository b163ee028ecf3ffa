//! EdgeController.
