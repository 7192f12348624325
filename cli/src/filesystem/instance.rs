//! The ZIOB instance a `ziob fs` command works through.

use ziob::{Client, Geometry, Ziob, ZiobConfig};
use ziob_zonefs::ZoneFs;

use super::FsCmdError;
use crate::access::{open, Access};

/// A ZIOB instance on the command's device (on the current core).
pub struct Instance {
    ziob: Ziob,
    client: Client,
    spec: String,
}

impl Instance {
    /// For `mkfs`: the device opened read-write, buffered (the default configuration).
    pub async fn read_write(spec: &str) -> Result<Instance, FsCmdError> {
        let device = open(spec, Access::ReadWrite).await?;
        Self::on(device, ZiobConfig::default(), spec).await
    }

    /// For `ls`, `df`, `fsck`: the device opened read-only, pass-through (nothing buffered,
    /// so nothing is ever written back).
    pub async fn read_only(spec: &str) -> Result<Instance, FsCmdError> {
        let device = open(spec, Access::ReadOnly).await?;
        Self::on(device, ZiobConfig::pass_through(), spec).await
    }

    async fn on(
        device: ziob::backends::AnyDevice,
        config: ZiobConfig,
        spec: &str,
    ) -> Result<Instance, FsCmdError> {
        let ziob = Ziob::with_device(device, config).await?;
        Ok(Instance {
            client: ziob.client(),
            ziob,
            spec: spec.to_string(),
        })
    }

    /// The instance's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The device geometry.
    pub fn geometry(&self) -> Geometry {
        self.client.geometry()
    }

    /// Mounts the file system read-only: nothing is written to the device.
    pub async fn mount(&self) -> Result<ZoneFs, FsCmdError> {
        ZoneFs::mount_read_only(self.client.clone())
            .await
            .map_err(|e| FsCmdError::mount(e, &self.spec))
    }

    /// Closes the instance: buffered data made durable (after `mkfs`).
    pub async fn close(&self) -> Result<(), FsCmdError> {
        Ok(self.ziob.clone().close().await?)
    }

    /// Drops the instance without syncing (a read-only one has nothing to sync).
    pub async fn abandon(&self) -> Result<(), FsCmdError> {
        Ok(self.ziob.clone().abandon().await?)
    }
}
