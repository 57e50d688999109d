//! The codec of the generated server (feature `server`): prost's, except
//! that a request which cannot be decoded is the caller's error.
//!
//! tonic's prost codec answers every decode failure with INTERNAL, so a
//! request nested past the decoder's recursion limit (or otherwise not a
//! valid message) would read as a server fault. The server decodes only
//! requests with this codec, so its failures answer INVALID_ARGUMENT; the
//! client keeps tonic's codec (a response it cannot decode is not its
//! caller's mistake).

use std::marker::PhantomData;

use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstEncoder};

/// [`ProstCodec`] whose decoder answers a malformed message with
/// INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct RequestCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for RequestCodec<T, U> {
    fn default() -> Self {
        Self { _pd: PhantomData }
    }
}

impl<T, U> Codec for RequestCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::default())
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder { _pd: PhantomData }
    }
}

/// Decodes one request; a malformed one is INVALID_ARGUMENT.
#[derive(Debug, Clone, Default)]
pub struct RequestDecoder<U> {
    _pd: PhantomData<U>,
}

impl<U: prost::Message + Default> Decoder for RequestDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            Status::invalid_argument(format!("the request is not a valid message: {e}"))
        })
    }
}
