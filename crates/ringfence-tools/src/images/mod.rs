//! The images family (seed 003): `generate_image`. Built in a later step of issue 14.
