//! Readers that bring models into the IR: `pt2` (torch.export archives)
//! and `torchscript` (torch.jit.save archives); the zip and
//! pickle readers serve them.

mod json;
pub mod pickle;
pub mod pt2;
pub mod torchscript;
