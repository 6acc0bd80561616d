//! Sockets behind the fence (see [`crate::fence`]): a TCP connector for
//! hyper whose connections ask the fence before every write (a TLS
//! handshake, a request's head, its body). A check before a request is
//! sent is not enough: a process frozen after it and woken later still
//! holds the request, and one without a body (an HTTP HEAD, GET or
//! DELETE) has nothing else that would ask.

use std::{
    future::Future,
    io,
    pin::Pin,
    task::{Context, Poll},
};

use hyper_util::{
    client::legacy::connect::{Connected, Connection, HttpConnector},
    rt::TokioIo,
};

use crate::fence::{FENCED, Fence};

/// Opens TCP connections whose writes ask the fence.
#[derive(Clone, Debug)]
pub struct FencedTcp {
    tcp: HttpConnector,
    fence: Fence,
}

impl FencedTcp {
    /// Connections opened by `tcp`, writing only while `fence` allows.
    pub fn new(tcp: HttpConnector, fence: Fence) -> Self {
        FencedTcp { tcp, fence }
    }
}

/// A connection being opened.
pub type Opening = Pin<Box<dyn Future<Output = Result<FencedIo, BoxError>> + Send>>;
/// Any error of opening one.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Uri> for FencedTcp {
    type Response = FencedIo;
    type Error = BoxError;
    type Future = Opening;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Opening {
        let (opening, fence) = (self.tcp.call(uri), self.fence.clone());
        Box::pin(async move {
            let socket = opening.await?;
            Ok(FencedIo {
                socket,
                fence,
                proxy: false,
            })
        })
    }
}

/// A TCP connection that refuses to write once the fence closes.
#[derive(Debug)]
pub struct FencedIo {
    socket: TokioIo<tokio::net::TcpStream>,
    fence: Fence,
    proxy: bool,
}

impl FencedIo {
    /// A connection to a forward proxy, which takes absolute URIs.
    pub fn to_proxy(self) -> Self {
        FencedIo {
            proxy: true,
            ..self
        }
    }

    fn refused(&self) -> Option<io::Error> {
        (!self.fence.allows()).then(|| {
            tracing::warn!("{FENCED}");
            io::Error::other(FENCED)
        })
    }
}

impl hyper::rt::Read for FencedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for FencedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(refused) = self.refused() {
            return Poll::Ready(Err(refused));
        }
        Pin::new(&mut self.socket).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(refused) = self.refused() {
            return Poll::Ready(Err(refused));
        }
        Pin::new(&mut self.socket).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.socket).poll_shutdown(cx)
    }
}

impl Connection for FencedIo {
    fn connected(&self) -> Connected {
        self.socket.connected().proxy(self.proxy)
    }
}
