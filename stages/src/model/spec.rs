//! The `[model]` table of an experiment file: which network to train.

keytag::tagged_enum! {
    /// The family of a [`ModelSpec`], without its widths.
    pub enum ModelKind {
        /// [`ModelSpec::Mlp`].
        Mlp = "mlp",
        /// [`ModelSpec::Cnn`].
        Cnn = "cnn",
        /// [`ModelSpec::Transformer`].
        Transformer = "transformer",
        /// Not a model trained here: a layer study of a user's checkpoint
        /// ([`read_checkpoint`]); no [`ModelSpec`] has this kind.
        Checkpoint = "checkpoint",
    }
}

/// The `[model]` table: the network's architecture. Input and output sizes come from the data.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSpec {
    /// Fully connected layers of the given widths, ReLU between, then a linear classifier.
    Mlp {
        /// Hidden widths, input side first (`[256, 256]` gives 64-256-256-10 on digits).
        hidden: Vec<usize>,
    },
    /// 3×3 convolutions (padding 1, ReLU, then 2×2 max-pooling while the image is at least 2×2),
    /// then fully connected layers as in the MLP. Needs an image data set.
    Cnn {
        /// Output channels of each convolution.
        channels: Vec<usize>,
        /// Hidden widths of the fully connected part after the convolutions.
        hidden: Vec<usize>,
    },
    /// A ViT-style encoder ([`super::TransformerArch`]) over patches of the input (square patches of
    /// an image, or runs of `patch` features of non-image data).
    Transformer {
        /// Encoder blocks.
        layers: usize,
        /// Width of the residual stream.
        d_model: usize,
        /// Attention heads (`d_model` must be a multiple).
        heads: usize,
        /// Hidden width of each block's MLP.
        d_ff: usize,
        /// Patch side (image data) or features per token.
        patch: usize,
    },
}

impl ModelSpec {
    /// The model's family.
    pub fn kind(&self) -> ModelKind {
        match self {
            ModelSpec::Mlp { .. } => ModelKind::Mlp,
            ModelSpec::Cnn { .. } => ModelKind::Cnn,
            ModelSpec::Transformer { .. } => ModelKind::Transformer,
        }
    }
}
