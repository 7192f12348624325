import os, time
def bench(name, setup, step, n=2000):
    path='/var/tmp/sy2'
    try: os.unlink(path)
    except: pass
    fd=os.open(path, os.O_RDWR|os.O_CREAT); setup(fd); os.fsync(fd)
    ts=[]
    for i in range(n):
        t=time.perf_counter(); step(fd,i); os.fdatasync(fd); ts.append(time.perf_counter()-t)
    ts.sort(); os.close(fd); return f'{name} {ts[n//2]*1e6:.0f}'
rec=b'r'*130; blk=b'b'*4096
def app_setup(fd): pass
def app(fd,i): os.write(fd,rec)
def zsetup(fd): os.pwrite(fd,b'\0'*(16<<20),0)
def zstep(fd,i): os.pwrite(fd,blk,(16+i)*4096); os.pwrite(fd,blk,4096*(1+i%2))
def ssetup(fd): os.ftruncate(fd,64<<20); os.pwrite(fd,b'\0'*65536,0)
for r in range(3):
    print(bench('append',app_setup,app), bench('zeroed',zsetup,zstep), bench('sparse',ssetup,zstep))
