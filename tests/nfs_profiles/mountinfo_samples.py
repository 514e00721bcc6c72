"""Recorded /proc/self/mountinfo lines, one per case the doctor must tell apart.

Each sample is the real system's lines for / and /srv plus one share line
mounted on /srv/primacy; the share options are as Linux 5.x/6.x prints them.
"""

from __future__ import annotations

BASE = (
    "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw,errors=remount-ro\n"
    "23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
    "24 22 253:2 / /srv rw,relatime shared:2 - xfs /dev/mapper/vg0-srv rw,attr2,inode64,noquota\n"
)

NFS4_RECOMMENDED = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs4 nas1:/export/primacy "
    "rw,sync,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=20,retrans=2,"
    "sec=sys,clientaddr=10.0.0.11,lookupcache=none,local_lock=none,addr=10.0.0.5\n"
)
NFS4_IPV6_VERS41 = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs4 [fd00::5]:/export/primacy "
    "rw,sync,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp6,timeo=20,retrans=2,"
    "sec=sys,clientaddr=fd00::11,lookupcache=none,local_lock=none,addr=fd00::5\n"
)
NFS4_DISTRIBUTION_DEFAULTS = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs4 nas1:/export/primacy "
    "rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,"
    "retrans=2,sec=sys,clientaddr=10.0.0.11,local_lock=none,addr=10.0.0.5\n"
)
NFS40_LOOKUPCACHE_POS = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs4 nas1:/export/primacy "
    "rw,sync,vers=4.0,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=20,retrans=2,"
    "sec=sys,clientaddr=10.0.0.11,lookupcache=pos,local_lock=none,addr=10.0.0.5\n"
)
NFS3 = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs nas1:/export/primacy "
    "rw,relatime,vers=3,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,"
    "sec=sys,mountaddr=10.0.0.5,mountvers=3,mountport=20048,mountproto=udp,local_lock=none,"
    "addr=10.0.0.5\n"
)
NFS3_NOLOCK = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs nas1:/export/primacy "
    "rw,relatime,vers=3,rsize=1048576,wsize=1048576,namlen=255,soft,nolock,proto=tcp,timeo=20,"
    "retrans=2,sec=sys,mountaddr=10.0.0.5,mountvers=3,mountport=20048,mountproto=udp,"
    "local_lock=all,addr=10.0.0.5\n"
)
NFS4_LOCAL_LOCK_FLOCK = (
    "412 24 0:52 / /srv/primacy rw,relatime shared:210 - nfs4 nas1:/export/primacy "
    "rw,sync,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,soft,proto=tcp,timeo=20,retrans=2,"
    "sec=sys,clientaddr=10.0.0.11,lookupcache=none,local_lock=flock,addr=10.0.0.5\n"
)
GFS2_RECOMMENDED = (
    "88 24 253:3 / /srv/primacy rw,noatime shared:50 - gfs2 /dev/mapper/vg_shared-primacy "
    "rw,seclabel\n"
)
GFS2_LOCALFLOCKS = (
    "88 24 253:3 / /srv/primacy rw,noatime shared:50 - gfs2 /dev/mapper/vg_shared-primacy "
    "rw,localflocks\n"
)
GFS2_LOCK_NOLOCK = (
    "88 24 253:3 / /srv/primacy rw,relatime shared:50 - gfs2 /dev/mapper/vg_shared-primacy "
    "rw,lockproto=lock_nolock\n"
)
CIFS_RECOMMENDED = (
    "97 24 0:60 / /srv/primacy rw,relatime shared:60 - cifs //nas1/primacy "
    "rw,vers=3.1.1,cache=none,username=primacy,uid=990,noforceuid,gid=990,noforcegid,"
    "addr=10.0.0.5,file_mode=0660,dir_mode=0770,soft,nounix,serverino,mapposix,rsize=4194304,"
    "wsize=4194304,bsize=1048576,echo_interval=10,actimeo=0,closetimeo=1\n"
)
SMB3_DEFAULTS = (
    "97 24 0:60 / /srv/primacy rw,relatime shared:60 - smb3 //nas1/primacy "
    "rw,vers=3.0,cache=strict,username=primacy,uid=990,noforceuid,gid=990,noforcegid,"
    "addr=10.0.0.5,file_mode=0660,dir_mode=0770,soft,nounix,serverino,mapposix,rsize=4194304,"
    "wsize=4194304,bsize=1048576,echo_interval=60,actimeo=1,closetimeo=1\n"
)
CIFS_NOBRL = CIFS_RECOMMENDED.replace(",soft,", ",soft,nobrl,")
CIFS_SMB1 = CIFS_RECOMMENDED.replace("vers=3.1.1", "vers=1.0")
EXT4 = "140 24 253:4 / /srv/primacy rw,relatime shared:70 - ext4 /dev/vdb1 rw\n"
EXT4_READ_ONLY = "140 24 253:4 / /srv/primacy ro,relatime shared:70 - ext4 /dev/vdb1 ro\n"
EXT4_NOBARRIER = "140 24 253:4 / /srv/primacy rw,relatime shared:70 - ext4 /dev/vdb1 rw,nobarrier\n"
XFS = "140 24 253:4 / /srv/primacy rw,relatime shared:70 - xfs /dev/vdb1 rw,attr2,inode64\n"
BTRFS = (
    "140 24 0:40 /@primacy /srv/primacy rw,relatime shared:70 - btrfs /dev/vdb1 "
    "rw,space_cache=v2,subvolid=257,subvol=/@primacy\n"
)
TMPFS = "140 24 0:41 / /srv/primacy rw,nosuid,nodev shared:70 - tmpfs tmpfs rw,size=1048576k\n"
FUSE_SSHFS = (
    "140 24 0:42 / /srv/primacy rw,nosuid,nodev,relatime shared:70 - fuse.sshfs "
    "nas1:/export/primacy rw,user_id=990,group_id=990\n"
)
OCFS2 = (
    "140 24 253:5 / /srv/primacy rw,relatime shared:70 - ocfs2 /dev/mapper/shared "
    "rw,_netdev,heartbeat=local,nointr,data=ordered,errors=remount-ro,atime_quantum=60,"
    "coherency=full,user_xattr,acl\n"
)
OVERLAY = (
    "140 24 0:43 / /srv/primacy rw,relatime shared:70 - overlay overlay "
    "rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
)
ESCAPED_SPACE = (
    "150 24 0:52 / /srv/primacy\\040share rw,relatime shared:210 - nfs4 nas1:/export/primacy "
    "rw,sync,vers=4.2,soft,proto=tcp,timeo=20,retrans=2,lookupcache=none,local_lock=none\n"
)
