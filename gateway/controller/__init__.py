"""The failover controller's wire side (codec, name server handlers); the state is core/namesrv/controller.py."""
