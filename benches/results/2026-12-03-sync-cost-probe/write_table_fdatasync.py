import os, time, mmap
def run(name, prep, direct=False, n=1000):
    path='/var/tmp/sytest'
    try: os.unlink(path)
    except: pass
    flags=os.O_RDWR|os.O_CREAT
    fd=os.open(path, flags)
    prep(fd)
    os.fsync(fd)
    if direct:
        os.close(fd); fd=os.open(path, os.O_RDWR|os.O_DIRECT)
    buf=mmap.mmap(-1,4096); buf.write(b'y'*4096)
    ts=[]
    for i in range(n):
        t=time.perf_counter()
        os.pwritev(fd,[buf],(i+16)*4096)
        os.pwritev(fd,[buf],0)  # table
        os.fdatasync(fd)
        ts.append(time.perf_counter()-t)
    ts.sort()
    print(f'{name:30s} median {ts[n//2]*1e6:7.1f} us  p90 {ts[n*9//10]*1e6:7.1f}')
    os.close(fd)
def sparse(fd): os.ftruncate(fd, 64<<20); os.pwrite(fd, b'\0'*4096, 0)
def zeroed(fd): os.pwrite(fd, b'\0'*(8<<20), 0); os.ftruncate(fd,64<<20)
def falloc(fd): os.posix_fallocate(fd, 0, 64<<20)
def wz(fd):
    import ctypes
    libc=ctypes.CDLL(None, use_errno=True)
    os.ftruncate(fd, 64<<20)
    r=libc.fallocate(fd, 0x80, ctypes.c_long(0), ctypes.c_long(8<<20))
    print('write_zeroes rc', r, ctypes.get_errno())
for d in (False, True):
    run(f'sparse direct={d}', sparse, d)
    run(f'zeroed direct={d}', zeroed, d)
    run(f'fallocate direct={d}', falloc, d)
    run(f'write_zeroes direct={d}', wz, d)
