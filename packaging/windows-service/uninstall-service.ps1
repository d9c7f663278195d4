# Stops and removes the ktesiod Windows service. The state directory is kept unless -RemoveState.
#   .\uninstall-service.ps1 [-RemoveState]
[CmdletBinding()]
param(
  [string]$Name = 'ktesiod',
  [string]$StateDir = (Join-Path $env:ProgramData 'ktesio'),
  [switch]$RemoveState
)
$ErrorActionPreference = 'Stop'

$service = Get-Service -Name $Name -ErrorAction SilentlyContinue
if (-not $service) {
  Write-Host "no service named '$Name'"
} else {
  if ($service.Status -ne 'Stopped') {
    Stop-Service -Name $Name
    $service.WaitForStatus('Stopped', [TimeSpan]::FromSeconds(60))
  }
  sc.exe delete $Name | Out-Null
  if ($LASTEXITCODE -ne 0) { throw "sc.exe delete returned $LASTEXITCODE" }
  Write-Host "removed service '$Name'"
}
if ($RemoveState -and (Test-Path -LiteralPath $StateDir)) {
  Remove-Item -Recurse -Force -LiteralPath $StateDir
  Write-Host "removed $StateDir"
}
