//! `reasonix-sftpfs`: one async filesystem interface over SFTP and the local disk.
