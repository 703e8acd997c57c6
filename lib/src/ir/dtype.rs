//! Element types, layouts and memory formats, each described once as a
//! table: the export schema's numbering (not c10's), the torch name, the
//! short name used in listings, and the element size.

use serde::{Serialize, Serializer};

macro_rules! dtypes {
    ($( $variant:ident = $code:literal, $torch:literal, $short:literal, $size:literal; )*) => {
        /// A tensor element type, numbered as the PT2 export schema's `ScalarType`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Dtype { $( $variant, )* }

        impl Dtype {
    pub fn is_complex(self) -> bool {
        matches!(
            self,
            Dtype::Complex32 | Dtype::Complex64 | Dtype::Complex128
        )
    }

    /// The dtype of a complex dtype's real and imaginary parts (float32 for
    /// complex64); any other dtype is its own.
    pub fn real_part(self) -> Dtype {
        match self {
            Dtype::Complex32 => Dtype::Float16,
            Dtype::Complex64 => Dtype::Float32,
            Dtype::Complex128 => Dtype::Float64,
            d => d,
        }
    }

            pub const ALL: &'static [Dtype] = &[$( Dtype::$variant, )*];

            /// The export schema's `ScalarType` number.
            pub fn code(self) -> u32 { match self { $( Dtype::$variant => $code, )* } }

            pub fn from_code(code: u32) -> Option<Dtype> {
                match code { $( $code => Some(Dtype::$variant), )* _ => None }
            }

            /// torch's name: `float32`, `bfloat16`, `bool`.
            pub fn torch_name(self) -> &'static str { match self { $( Dtype::$variant => $torch, )* } }

            /// The short name of listings: `f32`, `bf16`, `b8`.
            pub fn short_name(self) -> &'static str { match self { $( Dtype::$variant => $short, )* } }

            /// Bytes per element (0 for UNKNOWN).
            pub fn size(self) -> usize { match self { $( Dtype::$variant => $size, )* } }

            pub fn from_short_name(s: &str) -> Option<Dtype> {
                match s { $( $short => Some(Dtype::$variant), )* _ => None }
            }
        }
    };
}

dtypes! {
    Unknown = 0, "unknown", "unk", 0;
    Uint8 = 1, "uint8", "u8", 1;
    Int8 = 2, "int8", "i8", 1;
    Int16 = 3, "int16", "i16", 2;
    Int32 = 4, "int32", "i32", 4;
    Int64 = 5, "int64", "i64", 8;
    Float16 = 6, "float16", "f16", 2;
    Float32 = 7, "float32", "f32", 4;
    Float64 = 8, "float64", "f64", 8;
    Complex32 = 9, "complex32", "c32", 4;
    Complex64 = 10, "complex64", "c64", 8;
    Complex128 = 11, "complex128", "c128", 16;
    Bool = 12, "bool", "b8", 1;
    BFloat16 = 13, "bfloat16", "bf16", 2;
    Uint16 = 28, "uint16", "u16", 2;
    Float8E4M3Fn = 29, "float8_e4m3fn", "f8e4m3fn", 1;
    Float8E5M2 = 30, "float8_e5m2", "f8e5m2", 1;
    Float8E4M3Fnuz = 31, "float8_e4m3fnuz", "f8e4m3fnuz", 1;
    Float8E5M2Fnuz = 32, "float8_e5m2fnuz", "f8e5m2fnuz", 1;
    Float8E8M0Fnu = 33, "float8_e8m0fnu", "f8e8m0fnu", 1;
    Uint32 = 34, "uint32", "u32", 4;
    Uint64 = 35, "uint64", "u64", 8;
}

impl Dtype {
    pub fn is_floating(self) -> bool {
        matches!(
            self,
            Dtype::Float16
                | Dtype::Float32
                | Dtype::Float64
                | Dtype::BFloat16
                | Dtype::Float8E4M3Fn
                | Dtype::Float8E5M2
                | Dtype::Float8E4M3Fnuz
                | Dtype::Float8E5M2Fnuz
                | Dtype::Float8E8M0Fnu
        )
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.short_name())
    }
}

impl Serialize for Dtype {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.torch_name())
    }
}

macro_rules! small_enum {
    ($(#[$doc:meta])* $name:ident { $( $variant:ident = $code:literal, $text:literal; )* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $( $variant, )* }

        impl $name {
            pub fn code(self) -> u32 { match self { $( $name::$variant => $code, )* } }
            pub fn from_code(code: u32) -> Option<$name> {
                match code { $( $code => Some($name::$variant), )* _ => None }
            }
            /// torch's spelling: `torch.strided`, `torch.channels_last`.
            pub fn torch_name(self) -> &'static str { match self { $( $name::$variant => $text, )* } }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.torch_name())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.torch_name())
            }
        }
    };
}

small_enum! {
    /// The export schema's `Layout`.
    Layout {
        Unknown = 0, "unknown";
        SparseCoo = 1, "torch.sparse_coo";
        SparseCsr = 2, "torch.sparse_csr";
        SparseCsc = 3, "torch.sparse_csc";
        SparseBsr = 4, "torch.sparse_bsr";
        SparseBsc = 5, "torch.sparse_bsc";
        Mkldnn = 6, "torch._mkldnn";
        Strided = 7, "torch.strided";
    }
}

small_enum! {
    /// The export schema's `MemoryFormat`.
    MemoryFormat {
        Unknown = 0, "unknown";
        Contiguous = 1, "torch.contiguous_format";
        ChannelsLast = 2, "torch.channels_last";
        ChannelsLast3d = 3, "torch.channels_last_3d";
        Preserve = 4, "torch.preserve_format";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_code(d.code()), Some(*d));
            assert_eq!(Dtype::from_short_name(d.short_name()), Some(*d));
        }
        assert_eq!(Dtype::from_code(7), Some(Dtype::Float32));
        assert_eq!(Dtype::from_code(13), Some(Dtype::BFloat16));
        assert_eq!(Dtype::from_code(20), None);
    }
}
