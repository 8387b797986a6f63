//! (this family is not written yet)
